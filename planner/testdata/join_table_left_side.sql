-- A table on the left of a regular join is its latest versions too (a RIGHT join keeps the
-- stream's rows); no filter on the table's columns goes below the join.
-- job: j33
SELECT o.order_id, u.tier FROM users u RIGHT JOIN orders_mq o ON u.user_id = o.user_id WHERE u.tier <> 'x';
