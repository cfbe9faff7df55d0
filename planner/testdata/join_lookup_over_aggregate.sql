-- A lookup join takes append-only input only: over a GROUP BY it is refused.
-- job: j30
SELECT t.user_id, t.total, u.tier
FROM (SELECT user_id, SUM(amount) AS total FROM orders_mq GROUP BY user_id) t
JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON t.user_id = u.user_id;
