-- A global aggregate over 8 queues: everything is shuffled to one queue.
-- job: j4
SELECT COUNT(*) AS n, SUM(amount) AS total
FROM orders_mq;
