-- Filter and projection over a file stream: the WHERE stays above the scan, the scan keeps
-- only the three columns read, ts is pruned (no window needs the event time).
-- sink: big_orders
SELECT order_id, amount * 2 AS double_amount, UPPER(user_id) AS u
FROM orders
WHERE amount > 100 AND user_id <> 'bot';
