-- Interval join, LEFT: each order with its payments from 5 s before to 10 s after it
-- (strict bounds); an order without one is emitted with NULLs once the watermark passes
-- its interval's end. Both sides are exchanged on order_id into one two-input stage.
-- job: j20
SELECT o.order_id, o.amount, p.amount AS paid, p.ts AS paid_at
FROM orders_mq o LEFT JOIN payments_mq p
  ON o.order_id = p.order_id AND p.ts > o.ts - INTERVAL '5' SECOND AND p.ts < o.ts + INTERVAL '10' SECOND
WHERE o.amount > 10;
