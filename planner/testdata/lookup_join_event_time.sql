-- A table of a database has only its current rows: it cannot be joined as of an event time.
SELECT o.order_id, u.tier FROM orders o JOIN dim_users FOR SYSTEM_TIME AS OF o.ts AS u ON o.user_id = u.user_id;
