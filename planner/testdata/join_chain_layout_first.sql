-- A job created before plan layouts were recorded keeps its stages: the second join
-- reads its left side through an exchange (LayoutFirst).
-- job: jc
-- layout: 1
-- state_ttl: 60000
SELECT o.order_id, o.user_id, p.amount, r.amount AS refund
FROM orders_mq o
  JOIN payments_mq p ON p.order_id = o.order_id
  JOIN orders_keyed r ON r.order_id = o.order_id;
