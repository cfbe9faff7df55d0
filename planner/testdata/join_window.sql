-- Window join: two windowed aggregations joined on their key and window bounds; a window's
-- rows wait until it closes on both sides.
-- job: j22
SELECT a.user_id, a.window_start, a.n, b.m FROM
  (SELECT user_id, window_start, window_end, COUNT(*) AS n
   FROM TUMBLE(orders_mq, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) a
JOIN
  (SELECT user_id, window_start, window_end, COUNT(*) AS m
   FROM TUMBLE(payments_mq, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) b
ON a.user_id = b.user_id AND a.window_start = b.window_start AND a.window_end = b.window_end;
