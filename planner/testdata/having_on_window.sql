-- HAVING on window_start of an aggregated window stays above the aggregation.
SELECT user_id, window_start, COUNT(*) AS n
FROM TUMBLE(orders, ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end
HAVING window_start >= TIMESTAMP '2026-11-30 05:00:00' AND user_id LIKE 'u%';
