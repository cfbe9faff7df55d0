-- Without a time bound and without a state TTL a join of two streams is exact: it keeps
-- both sides until their rows are deleted; an inner join of append-only streams stays
-- append-only.
-- job: j25
SELECT o.order_id, p.amount FROM orders_mq o JOIN payments_mq p ON o.order_id = p.order_id;
