-- Interval join, FULL OUTER, with a condition on one side left in the ON (a residual: an
-- outer join's ON is not a filter of its inputs) and BETWEEN bounds.
-- job: j21
SELECT o.order_id AS oid, p.order_id AS pid
FROM orders o FULL OUTER JOIN payments p
  ON o.order_id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '10' SECOND AND p.amount > 20;
