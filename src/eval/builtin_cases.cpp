// The cases ds4-eval runs without --cases: short questions written for this project (not taken
// from any benchmark), with keys checked by hand. `ds4-eval --dump-cases` writes them as JSONL,
// the format --cases reads (docs/EVAL.md).
#include "eval/cases.h"

namespace ds4::eval {

const std::vector<Case>& builtin_cases() {
    using K = AnswerKind;
    static const std::vector<Case> cases = {
        {"arith-journey", "arith", "A train leaves at 09:40 and arrives at 13:15 the same day. How many minutes does the journey take?", K::Integer, "215"},
        {"logic-shortest", "logic", "Ann is taller than Ben. Ben is taller than Cid. Dee is shorter than Cid. Who is the shortest of the four?",
         K::Choice, "D", {"Ann", "Ben", "Cid", "Dee"}},
        {"code-odd-sum", "code", "What does f(9) return?\n\n```c\nint f(int n)\n{\n    int s = 0;\n    for (int i = 1; i <= n; i += 2)\n        s += i;\n    return s;\n}\n```",
         K::Integer, "25"},
        {"arith-sum-60", "arith", "What is the sum of the integers from 1 to 60?", K::Integer, "1830"},
        {"logic-clubs", "logic", "In a class of 30 students, 18 play chess, 14 play go and 5 play neither game. How many students play both?",
         K::Integer, "7"},
        {"code-copy-bound", "code",
         "The function copies a NUL-terminated string into a buffer of cap bytes. Which line numbers hold the bug? "
         "Give the line number, or the comma-separated line numbers, where the out-of-bounds write comes from; 0 if it is safe.\n\n"
         "```c\n1: void copy_name(char *dst, size_t cap, const char *src)\n2: {\n3:     size_t n = strlen(src);\n4:     if (n > cap)\n"
         "5:         n = cap;\n6:     memcpy(dst, src, n);\n7:     dst[n] = '\\0';\n8: }\n```",
         K::Lines, "4,7"},
        {"arith-pencils", "arith", "A shop sells pencils at 3 for 50 cents. How many cents do 27 pencils cost?", K::Integer, "450"},
        {"logic-glims", "logic", "All glims are plonks. Some plonks are red. Which statement must be true?", K::Choice, "C",
         {"Some glims are red.", "All plonks are glims.", "Every glim is a plonk.", "No glim is red."}},
        {"code-python-set", "code", "What does this Python program print?\n\n```python\nx = [3, 1, 4, 1, 5, 9, 2, 6]\nprint(sum(v for v in x if v % 2 == 0) * len(set(x)))\n```",
         K::Integer, "84"},
        {"arith-pow-mod", "arith", "What is the remainder when 2^20 is divided by 7?", K::Integer, "4"},
        {"logic-shift", "logic", "Each letter of a word is replaced by the next letter of the alphabet, so CAT becomes DBU. What does HAL become? "
         "Write the word in capital letters.", K::Exact, "IBM"},
        {"code-pointer", "code", "What does this C fragment print?\n\n```c\nint a[5] = {1, 2, 3, 4, 5};\nint *p = a + 1;\nprintf(\"%d\\n\", p[2] + *(a + 4));\n```",
         K::Integer, "9"},
        {"arith-divisors", "arith", "How many positive divisors does 360 have?", K::Integer, "24"},
        {"logic-clock", "logic", "What is the smaller angle, in degrees, between the hour hand and the minute hand of a clock at 3:30?", K::Integer, "75"},
        {"code-join", "code", "What is the value of the Python expression '-'.join(sorted('bca'))? Give the string without quotes.", K::Regex,
         "['\"]?a-b-c['\"]?"},
        {"arith-rectangle", "arith", "A rectangle has a perimeter of 46 cm and one side of 9 cm. What is its area in square centimetres?", K::Integer, "126"},
        {"logic-rain", "logic", "If it rains, the match is cancelled. The match was not cancelled. What follows?", K::Choice, "B",
         {"It rained.", "It did not rain.", "The match was played indoors.", "Nothing can be concluded."}},
        {"code-sum-first", "code",
         "sum_first should return the sum of the first k elements of v, where 0 <= k <= n and v holds n elements. Which line holds the bug? "
         "Give its line number; 0 if it is correct.\n\n```c\n1: int sum_first(const int *v, int n, int k)\n2: {\n3:     int s = 0;\n"
         "4:     for (int i = 0; i <= k; i++)\n5:         s += v[i];\n6:     return s;\n7: }\n```",
         K::Lines, "4"},
    };
    return cases;
}

}  // namespace ds4::eval
