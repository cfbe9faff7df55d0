-- The stream declares partitioned_by = 'user_id': records of one user share a queue, so the
-- aggregation by user_id needs no exchange.
-- job: j3
SELECT user_id, window_start, window_end, COUNT(*) AS n
FROM TUMBLE(orders_keyed, ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end;
