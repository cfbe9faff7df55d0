-- ORDER BY over a stream: a stream never ends.
SELECT user_id, amount FROM orders_mq ORDER BY amount DESC;
