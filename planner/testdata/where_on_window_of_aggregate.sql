-- WHERE on window_start of an aggregated window is not supported; HAVING is.
SELECT user_id, window_start, COUNT(*) AS n
FROM TUMBLE(orders, ts, INTERVAL '10' SECOND)
WHERE window_start > TIMESTAMP '2026-11-30 05:00:00'
GROUP BY user_id, window_start, window_end;
