-- A join of a join on the same key runs in the first join's stage: its output is already
-- split by order_id as the exchange of the third stream splits it.
-- job: jc
-- state_ttl: 60000
SELECT o.order_id, o.user_id, p.amount, r.amount AS refund
FROM orders_mq o
  JOIN payments_mq p ON p.order_id = o.order_id
  JOIN orders_keyed r ON r.order_id = o.order_id;
