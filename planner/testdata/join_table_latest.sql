-- A table joined without FOR SYSTEM_TIME: each order is joined with its user's latest
-- version, and the join's rows change (retract) when the user gets a new version.
-- job: j26
SELECT o.order_id, u.tier FROM orders_mq o JOIN users u ON o.user_id = u.user_id;
