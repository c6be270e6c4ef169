/* torch.special functions with no chlo counterpart: the Bessel functions J0, J1, Y0, Y1, the
 * modified ones I0, I1, K0, K1 (and K0, K1 scaled by e^x), spherical j0 and Airy Ai, and the
 * classical orthogonal polynomials P_n(x): Chebyshev T, U, V, W and their shifted forms, Hermite
 * H and He, Laguerre L, Legendre P. Each follows its CPU kernel in ATen's Math.h step by step:
 * the same Cephes coefficients, branch points, special cases and order of operations, so results
 * agree to rounding. The polynomials' three-term recurrences run in one stablehlo.while up to the
 * largest degree any element needs, each element keeping its value once past its own degree.
 * Integer and bool inputs compute in float32; 16-bit floats have no CPU kernel, so they fall back
 * and CPU raises its own error. Depends on ops/ helpers and hlo/ only. */
#include <float.h>

#include "ops/families.h"

typedef tp_hlo_value_t val_t;

/* Constants shaped like |like|, and the arithmetic the kernels are written in. */
static val_t K(tp_hlo_builder_t *b, double v, val_t like) { return tp_emit_full_like(b, v, &like); }
static val_t add(tp_hlo_builder_t *b, val_t x, val_t y) { return tp_hlo_binary(b, TP_HLO_ADD, x, y); }
static val_t sub(tp_hlo_builder_t *b, val_t x, val_t y) { return tp_hlo_binary(b, TP_HLO_SUB, x, y); }
static val_t mul(tp_hlo_builder_t *b, val_t x, val_t y) { return tp_hlo_binary(b, TP_HLO_MUL, x, y); }
static val_t dvd(tp_hlo_builder_t *b, val_t x, val_t y) { return tp_hlo_binary(b, TP_HLO_DIV, x, y); }
static val_t un(tp_hlo_builder_t *b, tp_hlo_unary_t op, val_t x) { return tp_hlo_unary(b, op, x); }
static val_t cmp(tp_hlo_builder_t *b, tp_hlo_cmp_t d, val_t x, val_t y) {
  return tp_hlo_compare(b, d, x, y);
}
static val_t cmpk(tp_hlo_builder_t *b, tp_hlo_cmp_t d, val_t x, double k) {
  return tp_hlo_compare(b, d, x, K(b, k, x));
}
static val_t sel(tp_hlo_builder_t *b, val_t p, val_t t, val_t f) { return tp_hlo_select(b, p, t, f); }
static val_t and_(tp_hlo_builder_t *b, val_t x, val_t y) { return tp_hlo_binary(b, TP_HLO_AND, x, y); }
static val_t or_(tp_hlo_builder_t *b, val_t x, val_t y) { return tp_hlo_binary(b, TP_HLO_OR, x, y); }

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Cephes' polevl: c[0] z^(n-1) + ... + c[n-1], by Horner. */
static val_t polevl(tp_hlo_builder_t *b, val_t z, const double *c, int n) {
  val_t acc = K(b, c[0], z);
  for (int i = 1; i < n; i++) acc = add(b, mul(b, acc, z), K(b, c[i], z));
  return acc;
}

/* Cephes' chbevl as Math.h unrolls it: the Chebyshev series in y, returned as 0.5 * (a - p). */
static val_t chbevl(tp_hlo_builder_t *b, val_t y, const double *c, int n) {
  val_t p = K(b, 0, y), q = p, a = K(b, c[0], y);
  for (int i = 1; i < n; i++) {
    p = q;
    q = a;
    a = add(b, sub(b, mul(b, y, q), p), K(b, c[i], y));
  }
  return mul(b, K(b, 0.5, y), sub(b, a, p));
}

/* ---- Bessel functions of the first and second kind ---- */

static const double kJ0PP[] = {7.96936729297347051624e-04, 8.28352392107440799803e-02,
                               1.23953371646414299388e+00, 5.44725003058768775090e+00,
                               8.74716500199817011941e+00, 5.30324038235394892183e+00,
                               9.99999999999999997821e-01};
static const double kJ0PQ[] = {9.24408810558863637013e-04, 8.56288474354474431428e-02,
                               1.25352743901058953537e+00, 5.47097740330417105182e+00,
                               8.76190883237069594232e+00, 5.30605288235394617618e+00,
                               1.00000000000000000218e+00};
static const double kJ0QP[] = {-1.13663838898469149931e-02, -1.28252718670509318512e+00,
                               -1.95539544257735972385e+01, -9.32060152123768231369e+01,
                               -1.77681167980488050595e+02, -1.47077505154951170175e+02,
                               -5.14105326766599330220e+01, -6.05014350600728481186e+00};
static const double kJ0QQ[] = {6.43178256118178023184e+01, 8.56430025976980587198e+02,
                               3.88240183605401609683e+03, 7.24046774195652478189e+03,
                               5.93072701187316984827e+03, 2.06209331660327847417e+03,
                               2.42005740240291393179e+02};
static const double kJ0RP[] = {-4.79443220978201773821e+09, 1.95617491946556577543e+12,
                               -2.49248344360967716204e+14, 9.70862251047306323952e+15};
static const double kJ0RQ[] = {4.99563147152651017219e+02, 1.73785401676374683123e+05,
                               4.84409658339962045305e+07, 1.11855537045356834862e+10,
                               2.11277520115489217587e+12, 3.10518229857422583814e+14,
                               3.18121955943204943306e+16, 1.71086294081043136091e+18};
static const double kY0YP[] = {1.55924367855235737965e+04, -1.46639295903971606143e+07,
                               5.43526477051876500413e+09, -9.82136065717911466409e+11,
                               8.75906394395366999549e+13, -3.46628303384729719441e+15,
                               4.42733268572569800351e+16, -1.84950800436986690637e+16};
static const double kY0YQ[] = {1.04128353664259848412e+03, 6.26107330137134956842e+05,
                               2.68919633393814121987e+08, 8.64002487103935000337e+10,
                               2.02979612750105546709e+13, 3.17157752842975028269e+15,
                               2.50596256172653059228e+17};
static const double kJ1PP[] = {7.62125616208173112003e-04, 7.31397056940917570436e-02,
                               1.12719608129684925192e+00, 5.11207951146807644818e+00,
                               8.42404590141772420927e+00, 5.21451598682361504063e+00,
                               1.00000000000000000254e+00};
static const double kJ1PQ[] = {5.71323128072548699714e-04, 6.88455908754495404082e-02,
                               1.10514232634061696926e+00, 5.07386386128601488557e+00,
                               8.39985554327604159757e+00, 5.20982848682361821619e+00,
                               9.99999999999999997461e-01};
static const double kJ1QP[] = {5.10862594750176621635e-02, 4.98213872951233449420e+00,
                               7.58238284132545283818e+01, 3.66779609360150777800e+02,
                               7.10856304998926107277e+02, 5.97489612400613639965e+02,
                               2.11688757100572135698e+02, 2.52070205858023719784e+01};
static const double kJ1QQ[] = {7.42373277035675149943e+01, 1.05644886038262816351e+03,
                               4.98641058337653607651e+03, 9.56231892404756170795e+03,
                               7.99704160447350683650e+03, 2.82619278517639096600e+03,
                               3.36093607810698293419e+02};
static const double kJ1RP[] = {-8.99971225705559398224e+08, 4.52228297998194034323e+11,
                               -7.27494245221818276015e+13, 3.68295732863852883286e+15};
static const double kJ1RQ[] = {6.20836478118054335476e+02, 2.56987256757748830383e+05,
                               8.35146791431949253037e+07, 2.21511595479792499675e+10,
                               4.74914122079991414898e+12, 7.84369607876235854894e+14,
                               8.95222336184627338078e+16, 5.32278620332680085395e+18};
static const double kY1YP[] = {1.26320474790178026440e+09, -6.47355876379160291031e+11,
                               1.14509511541823727583e+14, -8.12770255501325109621e+15,
                               2.02439475713594898196e+17, -7.78877196265950026825e+17};
static const double kY1YQ[] = {5.94301592346128195359e+02, 2.35564092943068577943e+05,
                               7.34811944459721705660e+07, 1.87601316108706159478e+10,
                               3.88231277496238566008e+12, 6.20557727146953693363e+14,
                               6.87141087355300489866e+16, 3.97270608116560655612e+18};

#define SQRT_2_OVER_PI 0.797884560802865355879892119868763737
#define TWO_OVER_PI 0.636619772367581343075535053490057448

/* The asymptotic form above 5 that J and Y of one order share: with P = pp/pq, Q = qp/qq in w,
 * J = (P cos(x - phase) - 5/x Q sin(x - phase)) sqrt(2/pi) / sqrt(x) and Y the same with sin and
 * cos exchanged and a plus. Order 0 takes w = 25 / x^2, order 1 (5/x)^2, as the kernels do. */
static val_t bessel_asymptotic(tp_hlo_builder_t *b, val_t x, int order, bool second_kind) {
  val_t w = order == 0 ? dvd(b, K(b, 25, x), mul(b, x, x))
                       : mul(b, dvd(b, K(b, 5, x), x), dvd(b, K(b, 5, x), x));
  val_t pp = polevl(b, w, order ? kJ1PP : kJ0PP, 7), pq = polevl(b, w, order ? kJ1PQ : kJ0PQ, 7);
  val_t qp = polevl(b, w, order ? kJ1QP : kJ0QP, 8), qq = polevl(b, w, order ? kJ1QQ : kJ0QQ, 7);
  val_t ph = sub(b, x, K(b, order ? 2.356194490192344928846982537459627163
                                  : 0.785398163397448309615660845819875721, x));
  val_t s = un(b, TP_HLO_SIN, ph), c = un(b, TP_HLO_COS, ph);
  val_t lead = mul(b, dvd(b, pp, pq), second_kind ? s : c);
  val_t tail = mul(b, mul(b, dvd(b, K(b, 5, x), x), dvd(b, qp, qq)), second_kind ? c : s);
  val_t r = second_kind ? add(b, lead, tail) : sub(b, lead, tail);
  return dvd(b, mul(b, r, K(b, SQRT_2_OVER_PI, x)), un(b, TP_HLO_SQRT, x));
}

/* J0 of |x| >= 0 (the caller takes |x|). */
static val_t bessel_j0_abs(tp_hlo_builder_t *b, val_t x) {
  val_t z = mul(b, x, x);
  val_t rat = dvd(b, mul(b, mul(b, sub(b, z, K(b, 5.78318596294678452118e+00, x)),
                                sub(b, z, K(b, 3.04712623436620863991e+01, x))),
                         polevl(b, z, kJ0RP, N_OF(kJ0RP))),
                  polevl(b, z, kJ0RQ, N_OF(kJ0RQ)));
  val_t tiny = sub(b, K(b, 1, x), dvd(b, z, K(b, 4, x)));
  val_t small = sel(b, cmpk(b, TP_CMP_LT, x, 0.00001), tiny, rat);
  return sel(b, cmpk(b, TP_CMP_LE, x, 5), small, bessel_asymptotic(b, x, 0, false));
}

/* J1 of x >= 0. */
static val_t bessel_j1_pos(tp_hlo_builder_t *b, val_t x) {
  val_t z = mul(b, x, x);
  val_t rat = dvd(b, polevl(b, z, kJ1RP, N_OF(kJ1RP)), polevl(b, z, kJ1RQ, N_OF(kJ1RQ)));
  val_t small = mul(b, mul(b, mul(b, rat, x), sub(b, z, K(b, 1.46819706421238932572e+01, x))),
                    sub(b, z, K(b, 4.92184563216946036703e+01, x)));
  return sel(b, cmpk(b, TP_CMP_LE, x, 5), small, bessel_asymptotic(b, x, 1, false));
}

static val_t bessel_j1(tp_hlo_builder_t *b, val_t x) {
  val_t r = bessel_j1_pos(b, un(b, TP_HLO_ABS, x));
  return sel(b, cmpk(b, TP_CMP_LT, x, 0), un(b, TP_HLO_NEG, r), r);
}

/* Y0, Y1: -inf at 0, NaN below. */
static val_t bessel_y(tp_hlo_builder_t *b, val_t x, int order) {
  val_t z = mul(b, x, x), small;
  if (order == 0) {
    val_t rat = dvd(b, polevl(b, z, kY0YP, N_OF(kY0YP)), polevl(b, z, kY0YQ, N_OF(kY0YQ)));
    small = add(b, rat, mul(b, mul(b, K(b, TWO_OVER_PI, x), un(b, TP_HLO_LOG, x)),
                            bessel_j0_abs(b, x)));
  } else {
    val_t rat = dvd(b, polevl(b, z, kY1YP, N_OF(kY1YP)), polevl(b, z, kY1YQ, N_OF(kY1YQ)));
    val_t j = sub(b, mul(b, bessel_j1_pos(b, x), un(b, TP_HLO_LOG, x)), dvd(b, K(b, 1, x), x));
    small = add(b, mul(b, x, rat), mul(b, K(b, TWO_OVER_PI, x), j));
  }
  small = sel(b, cmpk(b, TP_CMP_LT, x, 0), K(b, __builtin_nan(""), x), small);
  small = sel(b, cmpk(b, TP_CMP_EQ, x, 0), K(b, -__builtin_inf(), x), small);
  return sel(b, cmpk(b, TP_CMP_LE, x, 5), small, bessel_asymptotic(b, x, order, true));
}

/* ---- modified Bessel functions ---- */

static const double kI0A[] = {
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15,  -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11,  -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06,  -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03,  -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01,  -3.04682672343198398683e-01, 6.76795274409476084995e-01};
static const double kI0B[] = {
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17,  -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15,  3.81168066935262242075e-15,  -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14,  3.85277838274214270114e-13,
    7.18012445138366623367e-13,  -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11,  4.94060238822496958910e-10,
    3.39623202570838634515e-09,  2.26666899049817806459e-08,  2.04891858946906374183e-07,
    2.89137052083475648297e-06,  6.88975834691682398426e-05,  3.36911647825569408990e-03,
    8.04490411014108831608e-01};
static const double kI1A[] = {
    2.77791411276104639959e-18,  -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15,  -5.04218550472791168711e-14,
    3.22379336594557470981e-13,  -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10,  -1.88724975172282928790e-09,
    9.38153738649577178388e-09,  -4.44505912879632808065e-08, 2.00329475355213526229e-07,
    -8.56872026469545474066e-07, 3.47025130813767847674e-06,  -1.32731636560394358279e-05,
    4.78156510755005422638e-05,  -1.61760815825896745588e-04, 5.12285956168575772895e-04,
    -1.51357245063125314899e-03, 4.15642294431288815669e-03,  -1.05640848946261981558e-02,
    2.47264490306265168283e-02,  -5.29459812080949914269e-02, 1.02643658689847095384e-01,
    -1.76416518357834055153e-01, 2.52587186443633654823e-01};
static const double kI1B[] = {
    7.51729631084210481353e-18,  4.41434832307170791151e-18,  -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16,  3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14,  -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12,  1.41258074366137813316e-11,
    3.25260358301548823856e-11,  -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-09, -2.63146884688951950684e-08, -2.51223623787020892529e-07,
    -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
    7.78576235018280120474e-01};
static const double kK0A[] = {
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01};
static const double kK0B[] = {
    5.30043377268626276149e-18,  -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16,  -1.84859337734377901440e-15,
    6.34007647740507060557e-15,  -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12,  -4.51459788337394416547e-12,
    1.85594911495471785253e-11,  -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09,  -4.66048989768794782956e-08,
    2.76681363944501510342e-07,  -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03,  -3.14481013119645005427e-02,
    2.44030308206595545468e+00};
static const double kK1A[] = {
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00};
static const double kK1B[] = {
    -5.75674448366501715755e-18, 1.79405087314755922667e-17,  -5.68946255844285935196e-17,
    1.83809354436663880070e-16,  -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14,  -8.97670518232499435011e-14,
    3.34841966607842919884e-13,  -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11,  -4.19035475934189648750e-10,
    2.01504975519703286596e-09,  -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06,  -1.93619797416608296024e-05,
    1.95215518471351631108e-04,  -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00};

/* I0 and I1: up to |x| = 8 the series in |x|/2 - 2, beyond it the one in 32/|x| - 2. */
static val_t modified_bessel_i(tp_hlo_builder_t *b, val_t x, int order) {
  val_t a = un(b, TP_HLO_ABS, x), e = un(b, TP_HLO_EXP, a);
  val_t ys = sub(b, dvd(b, a, K(b, 2, x)), K(b, 2, x));
  val_t yl = sub(b, dvd(b, K(b, 32, x), a), K(b, 2, x));
  val_t small, large = dvd(b, mul(b, e, chbevl(b, yl, order ? kI1B : kI0B, 25)),
                           un(b, TP_HLO_SQRT, a));
  if (order == 0) {
    small = mul(b, e, chbevl(b, ys, kI0A, N_OF(kI0A)));
  } else {
    small = mul(b, mul(b, chbevl(b, ys, kI1A, N_OF(kI1A)), a), e);
  }
  val_t r = sel(b, cmpk(b, TP_CMP_LE, a, 8), small, large);
  return order ? sel(b, cmpk(b, TP_CMP_LT, x, 0), un(b, TP_HLO_NEG, r), r) : r;
}

/* K0 and K1, times e^x when |scaled|: up to 2 the series in x^2 - 2 with the log(x/2) I term,
 * beyond it the one in 8/x - 2. inf at 0, NaN below. */
static val_t modified_bessel_k(tp_hlo_builder_t *b, val_t x, int order, bool scaled) {
  val_t ys = sub(b, mul(b, x, x), K(b, 2, x));
  val_t yl = sub(b, dvd(b, K(b, 8, x), x), K(b, 2, x));
  val_t lg = un(b, TP_HLO_LOG, mul(b, K(b, 0.5, x), x));
  val_t small, large = dvd(b, chbevl(b, yl, order ? kK1B : kK0B, 25), un(b, TP_HLO_SQRT, x));
  if (order == 0)
    small = sub(b, chbevl(b, ys, kK0A, N_OF(kK0A)), mul(b, lg, modified_bessel_i(b, x, 0)));
  else
    small = add(b, mul(b, lg, modified_bessel_i(b, x, 1)), dvd(b, chbevl(b, ys, kK1A, N_OF(kK1A)), x));
  if (scaled) {
    small = mul(b, small, un(b, TP_HLO_EXP, x));
  } else {
    /* exp(-x) * (0.5 * (b - p)) / sqrt(x): the chbevl value times e^-x, then divided. */
    large = dvd(b, mul(b, un(b, TP_HLO_EXP, un(b, TP_HLO_NEG, x)), chbevl(b, yl, order ? kK1B : kK0B, 25)),
                un(b, TP_HLO_SQRT, x));
  }
  val_t r = sel(b, cmpk(b, TP_CMP_LE, x, 2), small, large);
  r = sel(b, cmpk(b, TP_CMP_LT, x, 0), K(b, __builtin_nan(""), x), r);
  return sel(b, cmpk(b, TP_CMP_EQ, x, 0), K(b, __builtin_inf(), x), r);
}

/* ---- spherical j0 and Airy Ai ---- */

static val_t spherical_bessel_j0(tp_hlo_builder_t *b, val_t x) {
  static const double c[] = {1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
                             -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0, 1.0};
  val_t z = mul(b, x, x), s = K(b, c[0], x);
  for (int i = 1; i < N_OF(c); i++) s = add(b, K(b, c[i], x), mul(b, z, s));
  val_t r = sel(b, cmpk(b, TP_CMP_LT, un(b, TP_HLO_ABS, x), 0.5), s,
                dvd(b, un(b, TP_HLO_SIN, x), x));
  return sel(b, un(b, TP_HLO_IS_INF, x), K(b, 0, x), r);
}

static const double kAiAN[] = {3.46538101525629032477e-01, 1.20075952739645805542e+01,
                               7.62796053615234516538e+01, 1.68089224934630576269e+02,
                               1.59756391350164413639e+02, 7.05360906840444183113e+01,
                               1.40264691163389668864e+01, 9.99999999999999995305e-01};
static const double kAiAD[] = {5.67594532638770212846e-01, 1.47562562584847203173e+01,
                               8.45138970141474626562e+01, 1.77318088145400459522e+02,
                               1.64234692871529701831e+02, 7.14778400825575695274e+01,
                               1.40959135607834029598e+01, 1.00000000000000000470e+00};
static const double kAiAFN[] = {-1.31696323418331795333e-01, -6.26456544431912369773e-01,
                                -6.93158036036933542233e-01, -2.79779981545119124951e-01,
                                -4.91900132609500318020e-02, -4.06265923594885404393e-03,
                                -1.59276496239262096340e-04, -2.77649108155232920844e-06,
                                -1.67787698489114633780e-08};
static const double kAiAFD[] = {1.33560420706553243746e+01, 3.26825032795224613948e+01,
                                2.67367040941499554804e+01, 9.18707402907259625840e+00,
                                1.47529146771666414581e+00, 1.15687173795188044134e-01,
                                4.40291641615211203805e-03, 7.54720348287414296618e-05,
                                4.51850092970580378464e-07};
static const double kAiAGN[] = {1.97339932091685679179e-02, 3.91103029615688277255e-01,
                                1.06579897599595591108e+00, 9.39169229816650230044e-01,
                                3.51465656105547619242e-01, 6.33888919628925490927e-02,
                                5.85804113048388458567e-03, 2.82851600836737019778e-04,
                                6.98793669997260967291e-06, 8.11789239554389293311e-08,
                                3.41551784765923618484e-10};
static const double kAiAGD[] = {9.30892908077441974853e+00, 1.98352928718312140417e+01,
                                1.55646628932864612953e+01, 5.47686069422975497931e+00,
                                9.54293611618961883998e-01, 8.64580826352392193095e-02,
                                4.12656523824222607191e-03, 1.01259085116509135510e-04,
                                1.17166733214413521882e-06, 4.91834570062930015649e-09};

#define INV_SQRT_PI 5.64189583547756286948e-01

/* a / 3 as the kernel divides. XLA turns a division by a constant into a multiplication by the
 * rounded reciprocal, an ulp off, which Ai's phase at large |x| magnifies; a divisor it cannot
 * fold (3 + 0 * |finite|) keeps the division. */
static val_t div3(tp_hlo_builder_t *b, val_t a, val_t finite) {
  return dvd(b, a, add(b, K(b, 3, a), mul(b, K(b, 0, a), finite)));
}

/* Airy Ai: the oscillating asymptotic form below -2.09, the decaying one from 2.09, and between
 * them the Maclaurin series f and g (Ai = c1 f - c2 g), summed while the last term of f is above
 * epsilon relative to f, per element; the kernel needs at most 10 terms in float, 14 in double. */
static val_t airy_ai(tp_hlo_builder_t *b, val_t x) {
  bool dbl = x.dtype == TP_DTYPE_F64;
  val_t one = K(b, 1, x);
  /* x < -2.09 */
  val_t xn = sel(b, cmpk(b, TP_CMP_LT, x, -2.09), x, K(b, -2.09, x));
  val_t sq = un(b, TP_HLO_SQRT, un(b, TP_HLO_NEG, xn));
  val_t zt = div3(b, mul(b, mul(b, K(b, -2, x), xn), sq), xn); /* -2 x sqrt(-x) / 3 */
  val_t z = dvd(b, one, zt), zz = mul(b, z, z);
  val_t afn = polevl(b, zz, kAiAFN, N_OF(kAiAFN)), afd = polevl(b, zz, kAiAFD, N_OF(kAiAFD));
  val_t agn = polevl(b, zz, kAiAGN, N_OF(kAiAGN)), agd = polevl(b, zz, kAiAGD, N_OF(kAiAGD));
  val_t t = add(b, zt, K(b, 0.25 * 3.14159265358979323846, x));
  val_t neg = mul(b, dvd(b, K(b, INV_SQRT_PI, x), un(b, TP_HLO_SQRT, sq)),
                  sub(b, mul(b, un(b, TP_HLO_SIN, t), add(b, one, dvd(b, mul(b, zz, afn), afd))),
                      mul(b, un(b, TP_HLO_COS, t), dvd(b, mul(b, z, agn), agd))));
  /* x >= 2.09 */
  val_t xp = sel(b, cmpk(b, TP_CMP_GE, x, 2.09), x, K(b, 2.09, x));
  val_t zeta = div3(b, mul(b, mul(b, K(b, 2, x), xp), un(b, TP_HLO_SQRT, xp)), xp);
  val_t iz = dvd(b, one, zeta);
  val_t ratio = dvd(b, polevl(b, iz, kAiAN, N_OF(kAiAN)), polevl(b, iz, kAiAD, N_OF(kAiAD)));
  val_t pos = dvd(b, mul(b, K(b, INV_SQRT_PI, x), ratio),
                  mul(b, mul(b, K(b, 2, x), un(b, TP_HLO_SQRT, un(b, TP_HLO_SQRT, xp))),
                      un(b, TP_HLO_EXP, zeta)));
  /* the series; a term's k runs 3i-1, 3i, 3i+1 in the i-th step */
  val_t f = one, g = x, m = one, n = x, tt = one, z3 = mul(b, mul(b, x, x), x);
  val_t eps = K(b, dbl ? DBL_EPSILON : FLT_EPSILON, x);
  for (int i = 1, steps = dbl ? 18 : 12; i <= steps; i++) {
    val_t on = cmp(b, TP_CMP_GT, tt, eps);
    val_t m1 = dvd(b, dvd(b, mul(b, m, z3), K(b, 3 * i - 1, x)), K(b, 3 * i, x));
    val_t n1 = dvd(b, dvd(b, mul(b, n, z3), K(b, 3 * i, x)), K(b, 3 * i + 1, x));
    val_t f1 = add(b, f, m1), g1 = add(b, g, n1);
    m = sel(b, on, m1, m);
    n = sel(b, on, n1, n);
    f = sel(b, on, f1, f);
    g = sel(b, on, g1, g);
    tt = sel(b, on, un(b, TP_HLO_ABS, dvd(b, m1, f1)), tt);
  }
  val_t series = sub(b, mul(b, K(b, 0.355028053887817239260, x), f),
                     mul(b, K(b, 0.258819403792806798405, x), g));
  val_t r = sel(b, cmpk(b, TP_CMP_GE, x, 2.09), pos, series);
  r = sel(b, cmpk(b, TP_CMP_LT, x, -2.09), neg, r);
  r = sel(b, cmpk(b, TP_CMP_GT, x, 103.892), K(b, 0, x), r);
  return sel(b, un(b, TP_HLO_IS_INF, x), K(b, __builtin_nan(""), x), r);
}

/* ---- orthogonal polynomials P_n(x) ---- */

/* A kernel's early returns in its order: the first whose condition holds gives the value. */
typedef struct {
  int n;
  val_t cond[8], val[8];
} cases_t;

static void when(cases_t *c, val_t cond, val_t v) {
  c->cond[c->n] = cond;
  c->val[c->n++] = v;
}

static val_t any_true(tp_hlo_builder_t *b, val_t p) {
  if (p.ndim == 0) return p;
  int64_t dims[TP_MAX_DIMS];
  for (int i = 0; i < p.ndim; i++) dims[i] = i;
  return tp_hlo_reduce(b, p, tp_hlo_constant_i(b, TP_DTYPE_BOOL, 0), TP_HLO_OR, p.ndim, dims);
}

/* The int64 constant |v| shaped like |like|. */
static val_t ik(tp_hlo_builder_t *b, int64_t v, val_t like) {
  return tp_hlo_broadcast_to(b, tp_hlo_constant_i(b, TP_DTYPE_I64, v), like.ndim, like.dims);
}

/* |k| (an i64 scalar or tensor) as the float type of |like|, broadcast to its shape. */
static val_t as_float(tp_hlo_builder_t *b, val_t k, val_t like) {
  return tp_hlo_broadcast_to(b, tp_hlo_convert(b, k, like.dtype), like.ndim, like.dims);
}

/* P_m from q = P_(m-1) and p = P_(m-2), as each kernel writes its loop (k counts its own way). */
static val_t recurrence_step(tp_hlo_builder_t *b, tp_special_t code, val_t y, val_t m, val_t p,
                             val_t q) {
  val_t one = ik(b, 1, m), k = tp_hlo_binary(b, TP_HLO_SUB, m, one); /* the kernels' k */
  switch (code) {
    case TP_SP_HERMITE_H: /* (x + x) q - k p, k = 2, 4, ... */
      return sub(b, mul(b, add(b, y, y), q), mul(b, as_float(b, tp_hlo_binary(b, TP_HLO_ADD, k, k), y), p));
    case TP_SP_HERMITE_HE:
      return sub(b, mul(b, y, q), mul(b, as_float(b, k, y), p));
    case TP_SP_LAGUERRE_L: { /* ((2k + (1 - x)) q - k p) / (k + 1) */
      val_t t = add(b, as_float(b, tp_hlo_binary(b, TP_HLO_ADD, k, k), y), sub(b, K(b, 1, y), y));
      return dvd(b, sub(b, mul(b, t, q), mul(b, as_float(b, k, y), p)), as_float(b, m, y));
    }
    case TP_SP_LEGENDRE_P: { /* ((2k + 1) x q - k p) / (k + 1) */
      val_t c = as_float(b, tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_ADD, k, k), one), y);
      return dvd(b, sub(b, mul(b, mul(b, c, y), q), mul(b, as_float(b, k, y), p)), as_float(b, m, y));
    }
    default: /* the Chebyshev kinds: (y + y) q - p */
      return sub(b, mul(b, add(b, y, y), q), p);
  }
}

/* The recurrence from P_0 = 1 and P_1 = |p1| up to each element's degree |nrec| (elements
 * below 2 keep P_1), in one loop over m = 2, 3, ... that runs while some element still needs a
 * step; an element that went NaN needs none, as the kernels stop there too. */
static val_t recurrence(tp_hlo_builder_t *b, tp_special_t code, val_t y, val_t p1, val_t nrec) {
  val_t init[3] = {tp_hlo_constant_i(b, TP_DTYPE_I64, 2), K(b, 1, y), p1}, s[3], outs[3];
  tp_hlo_while_begin(b, init, 3, s);
  val_t mb = tp_hlo_broadcast_to(b, s[0], nrec.ndim, nrec.dims);
  val_t live = and_(b, cmp(b, TP_CMP_LE, mb, nrec), cmp(b, TP_CMP_EQ, s[2], s[2]));
  tp_hlo_while_body(b, any_true(b, live), s);
  mb = tp_hlo_broadcast_to(b, s[0], nrec.ndim, nrec.dims);
  val_t on = cmp(b, TP_CMP_LE, mb, nrec);
  val_t r = recurrence_step(b, code, y, mb, s[1], s[2]);
  val_t next[3] = {tp_hlo_binary(b, TP_HLO_ADD, s[0], tp_hlo_constant_i(b, TP_DTYPE_I64, 1)),
                   sel(b, on, s[2], s[1]), sel(b, on, r, s[2])};
  tp_hlo_while_end(b, next, outs);
  return outs[2];
}

static bool shifted(tp_special_t code) {
  return code >= TP_SP_SHIFTED_CHEBYSHEV_T && code <= TP_SP_SHIFTED_CHEBYSHEV_W;
}

/* The Chebyshev kinds in y (x, or 2x - 1 for the shifted ones): the values at y = +-1 (x = 1, and
 * x = -1 or, shifted, x = 0), then above a degree the trigonometric form for |y| < 1, then the
 * recurrence. */
static void chebyshev_cases(tp_hlo_builder_t *b, tp_special_t code, val_t x, val_t y, val_t ni,
                            val_t even, cases_t *c, val_t *p1) {
  int kind = (code - TP_SP_CHEBYSHEV_T) % 4; /* 0 T, 1 U, 2 V, 3 W */
  bool sh = shifted(code);
  val_t one = K(b, 1, y), n_f = as_float(b, ni, y);
  val_t i1 = ik(b, 1, ni), np1 = as_float(b, tp_hlo_binary(b, TP_HLO_ADD, ni, i1), y);
  val_t n2p1 = as_float(b, tp_hlo_binary(b, TP_HLO_ADD, tp_hlo_binary(b, TP_HLO_ADD, ni, ni), i1), y);
  val_t alt1 = sel(b, even, one, un(b, TP_HLO_NEG, one));          /* (-1)^n */
  val_t alt_np1 = sel(b, even, np1, un(b, TP_HLO_NEG, np1));       /* (-1)^n (n + 1) */
  val_t alt_n2p1 = sel(b, even, n2p1, un(b, TP_HLO_NEG, n2p1));    /* (-1)^n (2n + 1) */
  val_t at_p1[4] = {one, np1, one, n2p1}, at_m1[4] = {alt1, alt_np1, alt_n2p1, alt1};
  val_t is_p1 = cmpk(b, TP_CMP_EQ, x, 1);
  val_t is_m1 = cmpk(b, TP_CMP_EQ, x, sh ? 0 : -1);
  when(c, is_p1, at_p1[kind]);
  when(c, is_m1, at_m1[kind]);
  static const int kTrigAbove[2][4] = {{6, 8, 8, 8}, {6, 6, 6, 4}};
  val_t trig_on = and_(b, cmp(b, TP_CMP_GT, ni, ik(b, kTrigAbove[sh][kind], ni)),
                       cmpk(b, TP_CMP_LT, un(b, TP_HLO_ABS, y), 1));
  val_t th = un(b, TP_HLO_ACOS, y), half = dvd(b, th, K(b, 2, y)), trig;
  val_t nh = mul(b, add(b, n_f, K(b, 0.5, y)), th); /* (n + 1/2) acos y */
  switch (kind) {
    case 0: trig = un(b, TP_HLO_COS, mul(b, n_f, th)); break;
    case 1: {
      val_t s = un(b, TP_HLO_SIN, th), a = mul(b, np1, th);
      trig = sel(b, cmpk(b, TP_CMP_NE, s, 0), dvd(b, un(b, TP_HLO_SIN, a), s),
                 dvd(b, mul(b, np1, un(b, TP_HLO_COS, a)), y));
      break;
    }
    case 2:
      trig = sel(b, cmpk(b, TP_CMP_NE, un(b, TP_HLO_SIN, half), 1),
                 dvd(b, un(b, TP_HLO_COS, nh), un(b, TP_HLO_COS, half)), alt_n2p1);
      break;
    default: /* the shifted kernel forgets the x > 0 case the plain one has */
      trig = sel(b, cmpk(b, TP_CMP_NE, un(b, TP_HLO_COS, half), 1),
                 dvd(b, un(b, TP_HLO_SIN, nh), un(b, TP_HLO_SIN, half)),
                 sh ? alt1 : sel(b, cmpk(b, TP_CMP_GT, y, 0), n2p1, alt1));
      break;
  }
  when(c, trig_on, trig);
  val_t yy = add(b, y, y);
  *p1 = kind == 0 ? y : kind == 1 ? yy : kind == 2 ? sub(b, yy, one) : add(b, yy, one);
}

/* P_n(x) of float x and n (the kernels take n as static_cast<int64_t>(n): truncated, and on
 * x86 NaN, infinities and values beyond int64 become INT64_MIN, a negative degree). */
static val_t polynomial(tp_hlo_builder_t *b, tp_special_t code, val_t x, val_t nf) {
  val_t valid = cmpk(b, TP_CMP_LT, un(b, TP_HLO_ABS, nf), 9223372036854775808.0);
  val_t ni = sel(b, valid, tp_hlo_convert(b, nf, TP_DTYPE_I64), ik(b, INT64_MIN, nf));
  val_t even = cmp(b, TP_CMP_EQ, tp_hlo_binary(b, TP_HLO_AND, ni, ik(b, 1, ni)), ik(b, 0, ni));
  val_t one = K(b, 1, x), zero = K(b, 0, x), p1, y = x;
  cases_t c = {0};
  when(&c, cmp(b, TP_CMP_LT, ni, ik(b, 0, ni)), zero);
  int limit = x.dtype == TP_DTYPE_F64 ? 512 : 128; /* Hermite: NaN above it */
  switch (code) {
    case TP_SP_HERMITE_H: case TP_SP_HERMITE_HE:
      p1 = code == TP_SP_HERMITE_H ? add(b, x, x) : x;
      when(&c, cmp(b, TP_CMP_EQ, ni, ik(b, 0, ni)), one);
      when(&c, cmp(b, TP_CMP_EQ, ni, ik(b, 1, ni)), p1);
      when(&c, cmp(b, TP_CMP_GT, ni, ik(b, limit, ni)), K(b, __builtin_nan(""), x));
      break;
    case TP_SP_LAGUERRE_L:
      p1 = sub(b, one, x);
      when(&c, cmpk(b, TP_CMP_EQ, x, 0), one);
      break;
    case TP_SP_LEGENDRE_P:
      p1 = x;
      when(&c, cmpk(b, TP_CMP_EQ, un(b, TP_HLO_ABS, x), 1),
           sel(b, or_(b, cmpk(b, TP_CMP_GT, x, 0), even), one, un(b, TP_HLO_NEG, one)));
      break;
    default:
      if (shifted(code)) y = sub(b, add(b, x, x), one);
      chebyshev_cases(b, code, x, y, ni, even, &c, &p1);
      break;
  }
  if (code != TP_SP_HERMITE_H && code != TP_SP_HERMITE_HE) {
    when(&c, cmp(b, TP_CMP_EQ, ni, ik(b, 0, ni)), one);
    when(&c, cmp(b, TP_CMP_EQ, ni, ik(b, 1, ni)), p1);
  }
  val_t taken = c.cond[0];
  for (int i = 1; i < c.n; i++) taken = or_(b, taken, c.cond[i]);
  val_t r = recurrence(b, code, y, p1, sel(b, taken, ik(b, 0, ni), ni));
  for (int i = c.n - 1; i >= 0; i--) r = sel(b, c.cond[i], c.val[i], r);
  return r;
}

/* ---- the op family ---- */

static bool is_polynomial(tp_special_t code) { return code >= TP_SP_POLYNOMIAL; }

tp_status_t *tp_infer_special(const tp_op_def_t *op, tp_op_arg_t *args, int n_args,
                              tp_meta_t *out, int *n_out) {
  int n = is_polynomial((tp_special_t)op->code) ? 2 : 1;
  const tp_meta_t *shape = NULL;
  for (int i = 0; i < n && i < n_args; i++)
    if (args[i].kind == TP_ARG_TENSOR) shape = &args[i].meta;
  if (n_args < n || !shape ||
      (args[0].kind != TP_ARG_TENSOR && args[0].kind != TP_ARG_SCALAR) ||
      (args[n - 1].kind != TP_ARG_TENSOR && args[n - 1].kind != TP_ARG_SCALAR))
    return tp_make_status(TP_INVALID_ARGUMENT, "%s: expected tensor arguments", op->name);
  tp_meta_t m = *shape;
  if (n == 2 && args[0].kind == TP_ARG_TENSOR && args[1].kind == TP_ARG_TENSOR)
    TP_RETURN_IF_ERROR(tp_broadcast_shapes(&args[0].meta, &args[1].meta, &m));
  m.dtype = tp_result_type(args, n);
  if ((op->flags & TP_OPF_FLOAT_RESULT) && !tp_dtype_is_float(m.dtype)) m.dtype = TP_DTYPE_F32;
  if (m.dtype == TP_DTYPE_BF16 || m.dtype == TP_DTYPE_F16) /* no CPU kernel: CPU raises */
    return tp_make_status(TP_UNIMPLEMENTED, "%s of a 16-bit float", op->name);
  for (int i = 0; i < n; i++)
    if (args[i].kind == TP_ARG_SCALAR) args[i].scalar_dtype = m.dtype;
  m.writes_arg = 0;
  out[0] = m;
  *n_out = 1;
  return NULL;
}

void tp_emit_special(const tp_op_def_t *op, tp_hlo_builder_t *b, const tp_op_arg_t *args,
                     int n_args, const tp_hlo_value_t *in, const tp_meta_t *out_meta,
                     tp_hlo_value_t *out) {
  tp_special_t code = (tp_special_t)op->code;
  val_t x = tp_emit_cast_shape(b, in[0], out_meta[0].dtype, &out_meta[0]);
  switch (code) {
    case TP_SP_AIRY_AI: out[0] = airy_ai(b, x); return;
    case TP_SP_BESSEL_J0: out[0] = bessel_j0_abs(b, un(b, TP_HLO_ABS, x)); return;
    case TP_SP_BESSEL_J1: out[0] = bessel_j1(b, x); return;
    case TP_SP_BESSEL_Y0: out[0] = bessel_y(b, x, 0); return;
    case TP_SP_BESSEL_Y1: out[0] = bessel_y(b, x, 1); return;
    case TP_SP_MODIFIED_BESSEL_I0: out[0] = modified_bessel_i(b, x, 0); return;
    case TP_SP_MODIFIED_BESSEL_I1: out[0] = modified_bessel_i(b, x, 1); return;
    case TP_SP_MODIFIED_BESSEL_K0: out[0] = modified_bessel_k(b, x, 0, false); return;
    case TP_SP_MODIFIED_BESSEL_K1: out[0] = modified_bessel_k(b, x, 1, false); return;
    case TP_SP_SCALED_MODIFIED_BESSEL_K0: out[0] = modified_bessel_k(b, x, 0, true); return;
    case TP_SP_SCALED_MODIFIED_BESSEL_K1: out[0] = modified_bessel_k(b, x, 1, true); return;
    case TP_SP_SPHERICAL_BESSEL_J0: out[0] = spherical_bessel_j0(b, x); return;
    default:
      out[0] = polynomial(b, code, x, tp_emit_cast_shape(b, in[1], out_meta[0].dtype, &out_meta[0]));
      return;
  }
}
