-- A table read from a topic joined AS OF a processing time: each order takes the version
-- current when it is joined (not deterministic; append-only).
-- job: j27
SELECT o.order_id, u.tier FROM orders_mq o JOIN users FOR SYSTEM_TIME AS OF PROCTIME() AS u ON o.user_id = u.user_id;
