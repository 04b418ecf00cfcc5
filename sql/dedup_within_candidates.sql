-- Candidate pairs within the dump: each document sharing a band key is paired with the key's
-- anchor, the least id holding it. A group of g documents gives g - 1 pairs, not g(g-1)/2 (a page
-- repeated 10,000 times stays cheap); two members both unlike their anchor meet only through
-- another band. The anchor depends on the ids alone, never on the read order.
WITH anchors AS (
    SELECT key, min(id) AS anchor
    FROM current_keys
    GROUP BY key
    HAVING count(*) > 1
),
pairs AS (
    SELECT DISTINCT k.id, a.anchor AS other
    FROM current_keys AS k
    JOIN anchors AS a USING (key)
    WHERE k.id <> a.anchor
)
SELECT p.id, p.other, d.signature, o.signature AS other_signature
FROM pairs AS p
JOIN current_documents AS d ON d.id = p.id
JOIN current_documents AS o ON o.id = p.other;
