-- HAVING on an aggregate stays above the aggregation; HAVING on a group key is pushed below
-- it. COUNT(DISTINCT), AVG, MIN, MAX.
SELECT user_id, window_start, COUNT(DISTINCT order_id) AS orders, AVG(amount) AS avg_amount,
       MIN(amount) AS lo, MAX(amount) AS hi
FROM TUMBLE(orders, ts, INTERVAL '1' HOUR)
GROUP BY user_id, window_start, window_end
HAVING COUNT(*) > 2 AND user_id <> 'bot';
