-- Deduplication over a stream without a state TTL keeps every key for ever: refused.
SELECT order_id, user_id FROM (
  SELECT order_id, user_id, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM orders_mq) x
WHERE rn = 1;
