-- The pipeline of the engine issue: a table-valued TUMBLE aggregated into a file sink.
-- sink: totals
SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM TUMBLE(orders, ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end;
