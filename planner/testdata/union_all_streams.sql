-- UNION ALL of two streams read in one stage (two inputs), then exchanged by user_id for
-- the window.
-- job: j4
SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM TUMBLE((SELECT user_id, ts FROM orders_mq UNION ALL SELECT user_id, ts FROM payments_mq), ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end;
