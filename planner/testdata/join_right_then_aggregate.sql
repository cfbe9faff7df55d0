-- A right join's rows are split by the right side's key (the left side's is NULL in its
-- rows alone): an aggregation grouped by the right key runs in the join's stage.
-- job: jr
SELECT p.order_id, COUNT(*) AS n
FROM orders_mq o RIGHT JOIN payments_mq p ON p.order_id = o.order_id
GROUP BY p.order_id;
