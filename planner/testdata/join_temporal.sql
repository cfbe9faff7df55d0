-- Temporal join: each order with the version of its user valid at the order's time.
-- job: j23
SELECT o.order_id, u.tier FROM orders_mq o
LEFT JOIN users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id;
