-- A lookup join, then an aggregation by a column of the table: the join runs before the
-- exchange, in the stage that reads orders; the aggregation's stage reads the shuffle.
-- job: j2
SELECT u.tier, window_start, window_end, COUNT(*) AS n
FROM TUMBLE(orders_mq, ts, INTERVAL '10' SECOND) o JOIN dim_users u ON u.user_id = o.user_id
GROUP BY u.tier, window_start, window_end;
