-- A broker topic with 8 queues is not partitioned by user_id: stage 0 shuffles by user_id
-- into j1-0-shuffle, stage 1 aggregates.
-- job: j1
-- sink: totals_mq
SELECT user_id, window_start, window_end, COUNT(*) AS n, SUM(amount) AS total
FROM TUMBLE(orders_mq, ts, INTERVAL '10' SECOND)
WHERE amount > 0
GROUP BY user_id, window_start, window_end;
