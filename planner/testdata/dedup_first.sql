-- Deduplication: the first order of each user by event time, with a state TTL of an hour.
-- job: j8
-- state_ttl: 3600000
SELECT order_id, user_id, ts FROM (
  SELECT order_id, user_id, ts, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM orders_mq) x
WHERE rn = 1;
