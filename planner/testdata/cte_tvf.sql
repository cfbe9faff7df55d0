-- A CTE as the relation of a window table function.
-- job: j3
WITH big AS (SELECT user_id, ts, amount FROM orders_keyed WHERE amount > 100)
SELECT user_id, window_start, window_end, COUNT(*) AS n, MAX(amount) AS m
FROM TUMBLE(big, ts, INTERVAL '10' SECOND) GROUP BY user_id, window_start, window_end;
