-- A windowed aggregation that emits every change instead of waiting for the window to close.
SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM TUMBLE(orders, ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end
EMIT CHANGES;
