-- UNION ALL of two aggregations, each in a stage of its own: both are exchanged into the
-- union's stage.
-- job: j5
SELECT user_id, window_start, n FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n
  FROM TUMBLE(orders_mq, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end) a
UNION ALL
SELECT user_id, window_start, n FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n
  FROM TUMBLE(payments_mq, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end) b;
