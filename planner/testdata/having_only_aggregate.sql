-- A non-windowed aggregation with HAVING on an aggregate that is not selected: it stays
-- above the aggregation and is computed only for it.
-- sink: user_stats
SELECT user_id, COUNT(*) AS n
FROM orders
GROUP BY user_id
HAVING SUM(amount) > 1000;
