-- A lookup join into a PostgreSQL table: one operator at the end of the orders' stage (no
-- exchange of either side); the table's columns the query reads are fetched (not country).
-- The residual condition stays on the join; the filter on the left side goes below it.
-- job: j1
-- sink: big_orders
SELECT o.order_id, o.amount, u.tier
FROM orders_mq o LEFT JOIN dim_users FOR SYSTEM_TIME AS OF PROCTIME() AS u
  ON o.user_id = u.user_id AND o.amount <= u.credit
WHERE o.amount > 10;
