-- A table-valued hopping window, aggregated.
SELECT user_id, window_start, window_end, SUM(amount) AS total
FROM HOP(orders, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end;
