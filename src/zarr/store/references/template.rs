//! The `{{ ... }}` of Kerchunk v1 references: `templates` named in URLs (`{{u}}/file.nc`) and
//! the expressions of `gen` entries (`{{(i + 1) * 1000}}`). Kerchunk writes them with Jinja;
//! what references use of it is a name or integer arithmetic over names, and that is what is
//! read here. Anything else is an error quoting the template, not a guess.

use std::collections::HashMap;

/// What a name in a template stands for.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Text(String),
    Int(i64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Text(s) => f.write_str(s),
            Value::Int(i) => write!(f, "{i}"),
        }
    }
}

/// `template` with every `{{ expression }}` replaced by its value under `names`.
pub(super) fn render(template: &str, names: &HashMap<String, Value>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("'{template}': a '{{{{' without its '}}}}'"))?;
        let value =
            evaluate(&after[..end], names).map_err(|reason| format!("'{template}': {reason}"))?;
        out.push_str(&value.to_string());
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of one expression: a name, or integer arithmetic (`+ - * // %`, parentheses)
/// over names bound to integers and integer literals.
fn evaluate(expression: &str, names: &HashMap<String, Value>) -> Result<Value, String> {
    let tokens = tokenize(expression)?;
    if let [Token::Name(name)] = tokens.as_slice() {
        return lookup(name, names).cloned();
    }
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
        names,
    };
    let value = parser.sum(0)?;
    if parser.at != tokens.len() {
        return Err(format!("cannot read '{}'", expression.trim()));
    }
    Ok(Value::Int(value))
}

fn lookup<'a>(name: &str, names: &'a HashMap<String, Value>) -> Result<&'a Value, String> {
    names
        .get(name)
        .ok_or_else(|| format!("'{name}' is neither a template nor a gen dimension"))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Int(i64),
    /// `+ - * % ( )`, and `//` as `f`.
    Op(char),
}

fn tokenize(expression: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = expression.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_digit() {
            let mut digits = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(d);
                chars.next();
            }
            let n = digits
                .parse()
                .map_err(|_| format!("the number {digits} is too large"))?;
            tokens.push(Token::Int(n));
        } else if c.is_alphabetic() || c == '_' {
            let mut name = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_alphanumeric() || **d == '_') {
                name.push(d);
                chars.next();
            }
            tokens.push(Token::Name(name));
        } else if "+-*/%()".contains(c) {
            chars.next();
            if c == '/' && chars.peek() == Some(&'/') {
                chars.next();
                tokens.push(Token::Op('f'));
            } else if c == '/' {
                // Jinja's `/` makes a float ("3.0"), which no key or offset holds.
                return Err(format!(
                    "'/' in '{}' divides into a float in Jinja: use '//'",
                    expression.trim()
                ));
            } else {
                tokens.push(Token::Op(c));
            }
        } else {
            return Err(format!(
                "'{c}' in '{}': only names and integer arithmetic are read",
                expression.trim()
            ));
        }
    }
    Ok(tokens)
}

/// Nesting deeper than this is refused: a crafted expression cannot exhaust the stack.
const MAX_DEPTH: usize = 32;

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    names: &'a HashMap<String, Value>,
}

impl Parser<'_> {
    fn next_op(&self, ops: &str) -> Option<char> {
        match self.tokens.get(self.at) {
            Some(Token::Op(op)) if ops.contains(*op) => Some(*op),
            _ => None,
        }
    }

    fn sum(&mut self, depth: usize) -> Result<i64, String> {
        let mut value = self.product(depth)?;
        while let Some(op) = self.next_op("+-") {
            self.at += 1;
            let rhs = self.product(depth)?;
            value = match op {
                '+' => value.checked_add(rhs),
                _ => value.checked_sub(rhs),
            }
            .ok_or("integer overflow")?;
        }
        Ok(value)
    }

    fn product(&mut self, depth: usize) -> Result<i64, String> {
        let mut value = self.atom(depth)?;
        while let Some(op) = self.next_op("*f%") {
            self.at += 1;
            let rhs = self.atom(depth)?;
            if op != '*' && rhs == 0 {
                return Err("division by zero".into());
            }
            value = match op {
                '*' => value.checked_mul(rhs),
                '%' => python_mod(value, rhs),
                _ => python_floor_div(value, rhs),
            }
            .ok_or("integer overflow")?;
        }
        Ok(value)
    }

    fn atom(&mut self, depth: usize) -> Result<i64, String> {
        if depth > MAX_DEPTH {
            return Err(format!("parentheses nested deeper than {MAX_DEPTH}"));
        }
        let token = self.tokens.get(self.at).ok_or("an expression ends early")?;
        self.at += 1;
        match token {
            Token::Int(n) => Ok(*n),
            Token::Name(name) => match lookup(name, self.names)? {
                Value::Int(n) => Ok(*n),
                Value::Text(_) => Err(format!("'{name}' is text, not a number")),
            },
            Token::Op('-') => self
                .atom(depth + 1)?
                .checked_neg()
                .ok_or("integer overflow".into()),
            Token::Op('(') => {
                let value = self.sum(depth + 1)?;
                match self.tokens.get(self.at) {
                    Some(Token::Op(')')) => {
                        self.at += 1;
                        Ok(value)
                    }
                    _ => Err("a '(' without its ')'".into()),
                }
            }
            Token::Op(op) => Err(format!("'{op}' where a number was expected")),
        }
    }
}

/// Python's `a // b` (rounds toward negative infinity); `b` is not zero.
fn python_floor_div(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    Some(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Python's `a % b` (the sign of `b`); `b` is not zero.
fn python_mod(a: i64, b: i64) -> Option<i64> {
    let r = a.checked_rem(b)?;
    Some(if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> HashMap<String, Value> {
        HashMap::from([
            ("u".to_string(), Value::Text("s3://bucket/data".into())),
            ("i".to_string(), Value::Int(3)),
            ("j".to_string(), Value::Int(7)),
        ])
    }

    #[test]
    fn names_and_arithmetic_are_replaced() {
        let n = names();
        assert_eq!(
            render("{{u}}/f_{{ i }}.nc", &n).unwrap(),
            "s3://bucket/data/f_3.nc"
        );
        assert_eq!(render("{{(i + 1) * 1000}}", &n).unwrap(), "4000");
        assert_eq!(
            render("{{ j // 2 }}-{{ j % 4 }}-{{-i + 10}}", &n).unwrap(),
            "3-3-7"
        );
        assert_eq!(render("no templates", &n).unwrap(), "no templates");
        // Python's floor division and modulo, signs included.
        assert_eq!(
            render("{{ -j // 2 }} {{ j // -2 }} {{ -j % 4 }} {{ j % -4 }}", &n).unwrap(),
            "-4 -4 1 -1"
        );
    }

    #[test]
    fn what_is_not_read_is_an_error_quoting_the_template() {
        let n = names();
        for (template, says) in [
            ("{{u", "without its"),
            ("{{ v }}", "'v' is neither a template"),
            ("{{ u * 2 }}", "'u' is text"),
            ("{{ i | upper }}", "'|'"),
            ("{{ (i + 1 }}", "without its ')'"),
            ("{{ i // 0 }}", "division by zero"),
            ("{{ i / 2 }}", "use '//'"),
            ("{{ 9223372036854775807 + i }}", "overflow"),
            ("{{ 99999999999999999999 }}", "too large"),
            ("{{ i + }}", "ends early"),
        ] {
            let err = render(template, &n).unwrap_err();
            assert!(err.contains(template), "{template}: {err}");
            assert!(err.contains(says), "{template}: {err}");
        }
        let deep = format!("{{{{{}1{}}}}}", "(".repeat(100), ")".repeat(100));
        assert!(render(&deep, &n).unwrap_err().contains("nested deeper"));
    }
}
