-- A left join's rows are split by the left side's key; grouped by the right side's key
-- (NULL in the left side's rows alone) the aggregation is exchanged.
-- job: jl
SELECT p.order_id, COUNT(*) AS n
FROM orders_mq o LEFT JOIN payments_mq p ON p.order_id = o.order_id
GROUP BY p.order_id;
