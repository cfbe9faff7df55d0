-- Partitioned by user_id, but the group key is an expression over it: an exchange is needed.
-- job: j2
SELECT LOWER(user_id) AS u, COUNT(*) AS n
FROM orders_keyed
GROUP BY LOWER(user_id);
