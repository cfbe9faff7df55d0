-- Window Top-N: the 3 users with the largest totals per window, numbered.
-- job: j7
SELECT user_id, window_start, total, rn FROM (
  SELECT user_id, window_start, window_end, total,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY total DESC, user_id) AS rn
  FROM (SELECT user_id, window_start, window_end, SUM(amount) AS total
        FROM TUMBLE(orders_mq, ts, INTERVAL '1' MINUTE) GROUP BY user_id, window_start, window_end) a) b
WHERE rn <= 3;
