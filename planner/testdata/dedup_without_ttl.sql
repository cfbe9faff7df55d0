-- Deduplication over a stream without a state TTL keeps one row of every key, as a GROUP BY
-- keeps its groups; keeping the last row, it is an upsert keyed by the partition.
SELECT order_id, user_id FROM (
  SELECT order_id, user_id, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM orders_mq) x
WHERE rn = 1;
