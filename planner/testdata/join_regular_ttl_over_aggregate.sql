-- With a state TTL a regular join forgets rows instead of taking them back: over a GROUP
-- BY it is refused.
-- job: j31
-- state_ttl: 3600000
SELECT t.user_id, t.total, p.amount
FROM (SELECT user_id, SUM(amount) AS total FROM orders_mq GROUP BY user_id) t
JOIN payments_mq p ON t.user_id = p.user_id;
