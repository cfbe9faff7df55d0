-- A table joined without FOR SYSTEM_TIME: each order takes the version current when it is
-- joined (processing time; not deterministic).
-- job: j26
SELECT o.order_id, u.tier FROM orders_mq o JOIN users u ON o.user_id = u.user_id;
