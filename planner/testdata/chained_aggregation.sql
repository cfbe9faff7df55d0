-- Chained aggregation: per window, the largest per-user count. The outer aggregation is
-- over the inner window (its window_start and window_end) and closes with it.
-- job: j6
SELECT window_start, window_end, MAX(n) AS top
FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n
      FROM TUMBLE(orders_mq, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) x
GROUP BY window_start, window_end;
