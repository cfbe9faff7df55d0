-- An exact LEFT join of two streams retracts: an order's NULL-padded row goes when its
-- first payment arrives.
-- job: j28
SELECT o.order_id, p.amount FROM orders_mq o LEFT JOIN payments_mq p ON o.order_id = p.order_id;
