-- A full join's rows are split by either side's key, so an aggregation over it is
-- exchanged even when grouped by a join key.
-- job: jf
SELECT o.order_id, COUNT(*) AS n
FROM orders_mq o FULL JOIN payments_mq p ON p.order_id = o.order_id
GROUP BY o.order_id;
