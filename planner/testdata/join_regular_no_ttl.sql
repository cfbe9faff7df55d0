-- Without a time bound and without a state TTL, a join of two streams would keep both
-- sides for ever: refused.
-- job: j25
SELECT o.order_id, p.amount FROM orders_mq o JOIN payments_mq p ON o.order_id = p.order_id;
