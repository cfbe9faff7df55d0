-- A derived table: the windowed count per user (exchanged by user_id), filtered above.
-- job: j2
SELECT user_id, window_start, n
FROM (SELECT user_id, window_start, window_end, COUNT(*) AS n
      FROM TUMBLE(orders_mq, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end) t
WHERE n >= 2;
