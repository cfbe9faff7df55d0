-- An aggregation grouped by the join key (and more) runs in the join's stage.
-- job: ja
-- state_ttl: 60000
SELECT o.order_id, o.user_id, SUM(p.amount) AS paid
FROM orders_mq o JOIN payments_mq p ON p.order_id = o.order_id
GROUP BY o.order_id, o.user_id;
