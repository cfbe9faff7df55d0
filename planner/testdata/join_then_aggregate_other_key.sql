-- An aggregation grouped by a column other than the join key is exchanged on its key.
-- job: jo
-- state_ttl: 60000
SELECT o.user_id, SUM(p.amount) AS paid
FROM orders_mq o JOIN payments_mq p ON p.order_id = o.order_id
GROUP BY o.user_id;
