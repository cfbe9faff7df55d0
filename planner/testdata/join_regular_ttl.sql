-- A join of two streams without a time bound keeps both sides for the state TTL.
-- job: j24
-- state_ttl: 3600000
SELECT o.order_id, p.amount FROM orders_mq o JOIN payments_mq p ON o.order_id = p.order_id
WHERE p.amount > 90;
