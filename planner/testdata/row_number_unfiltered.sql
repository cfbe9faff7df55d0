-- ROW_NUMBER() needs the enclosing query to keep the first rows.
SELECT user_id, rn FROM (SELECT user_id, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn FROM orders_mq) x;
