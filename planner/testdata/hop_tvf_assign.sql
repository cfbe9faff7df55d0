-- Hopping window assignment without aggregation (one output row per window).
SELECT user_id, amount, window_start
FROM HOP(orders, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND)
WHERE user_id LIKE 'u%';
