-- A push query to the client with LIMIT; only user_id and amount are read.
SELECT user_id FROM orders_mq WHERE amount > 5 LIMIT 10;
