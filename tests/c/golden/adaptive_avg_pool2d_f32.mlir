module @tp {
  func.func public @main(%v0: tensor<3x5x4xf32>) -> (tensor<3x2x3xf32>) {
    %v1 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v2 = "stablehlo.broadcast_in_dim"(%v1) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v3 = "stablehlo.compare"(%v2, %v2) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi1>
    %v4 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<3x2x3xi64>
    %v5 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v6 = "stablehlo.broadcast_in_dim"(%v5) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v7 = "stablehlo.constant"() {value = dense<5> : tensor<i64>} : () -> tensor<i64>
    %v8 = "stablehlo.broadcast_in_dim"(%v7) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v9 = "stablehlo.multiply"(%v4, %v8) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v10 = "stablehlo.divide"(%v9, %v6) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v11 = "stablehlo.constant"() {value = dense<5> : tensor<i64>} : () -> tensor<i64>
    %v12 = "stablehlo.broadcast_in_dim"(%v11) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v13 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v14 = "stablehlo.broadcast_in_dim"(%v13) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v15 = "stablehlo.add"(%v4, %v14) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v16 = "stablehlo.multiply"(%v15, %v12) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v17 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v18 = "stablehlo.broadcast_in_dim"(%v17) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v19 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v20 = "stablehlo.broadcast_in_dim"(%v19) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v21 = "stablehlo.add"(%v16, %v20) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v22 = "stablehlo.divide"(%v21, %v18) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v23 = "stablehlo.subtract"(%v22, %v10) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v24 = "stablehlo.subtract"(%v22, %v10) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v25 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v26 = "stablehlo.broadcast_in_dim"(%v25) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v27 = "stablehlo.compare"(%v24, %v26) {comparison_direction = #stablehlo<comparison_direction LE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi1>
    %v28 = "stablehlo.or"(%v3, %v27) : (tensor<3x2x3xi1>, tensor<3x2x3xi1>) -> tensor<3x2x3xi1>
    %v29 = "stablehlo.multiply"(%v2, %v24) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v30 = "stablehlo.iota"() {iota_dimension = 2 : i64} : () -> tensor<3x2x3xi64>
    %v31 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v32 = "stablehlo.broadcast_in_dim"(%v31) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v33 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v34 = "stablehlo.broadcast_in_dim"(%v33) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v35 = "stablehlo.multiply"(%v30, %v34) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v36 = "stablehlo.divide"(%v35, %v32) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v37 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v38 = "stablehlo.broadcast_in_dim"(%v37) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v39 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v40 = "stablehlo.broadcast_in_dim"(%v39) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v41 = "stablehlo.add"(%v30, %v40) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v42 = "stablehlo.multiply"(%v41, %v38) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v43 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v44 = "stablehlo.broadcast_in_dim"(%v43) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v45 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v46 = "stablehlo.broadcast_in_dim"(%v45) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v47 = "stablehlo.add"(%v42, %v46) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v48 = "stablehlo.divide"(%v47, %v44) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v49 = "stablehlo.subtract"(%v48, %v36) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v50 = "stablehlo.subtract"(%v48, %v36) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v51 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v52 = "stablehlo.broadcast_in_dim"(%v51) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v53 = "stablehlo.compare"(%v50, %v52) {comparison_direction = #stablehlo<comparison_direction LE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi1>
    %v54 = "stablehlo.or"(%v28, %v53) : (tensor<3x2x3xi1>, tensor<3x2x3xi1>) -> tensor<3x2x3xi1>
    %v55 = "stablehlo.multiply"(%v29, %v50) : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v56 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v57 = "stablehlo.broadcast_in_dim"(%v56) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v58 = "stablehlo.select"(%v54, %v57, %v55) : (tensor<3x2x3xi1>, tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v59 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v60 = "stablehlo.broadcast_in_dim"(%v59) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v61 = "stablehlo.compare"(%v58, %v60) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi1>
    %v62 = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<2x5xi64>
    %v63 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<2x5xi64>
    %v64 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v65 = "stablehlo.broadcast_in_dim"(%v64) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<2x5xi64>
    %v66 = "stablehlo.constant"() {value = dense<5> : tensor<i64>} : () -> tensor<i64>
    %v67 = "stablehlo.broadcast_in_dim"(%v66) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<2x5xi64>
    %v68 = "stablehlo.multiply"(%v62, %v67) : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
    %v69 = "stablehlo.divide"(%v68, %v65) : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
    %v70 = "stablehlo.constant"() {value = dense<5> : tensor<i64>} : () -> tensor<i64>
    %v71 = "stablehlo.broadcast_in_dim"(%v70) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<2x5xi64>
    %v72 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v73 = "stablehlo.broadcast_in_dim"(%v72) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<2x5xi64>
    %v74 = "stablehlo.add"(%v62, %v73) : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
    %v75 = "stablehlo.multiply"(%v74, %v71) : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
    %v76 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v77 = "stablehlo.broadcast_in_dim"(%v76) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<2x5xi64>
    %v78 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v79 = "stablehlo.broadcast_in_dim"(%v78) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<2x5xi64>
    %v80 = "stablehlo.add"(%v75, %v79) : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
    %v81 = "stablehlo.divide"(%v80, %v77) : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
    %v82 = "stablehlo.subtract"(%v81, %v69) : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi64>
    %v83 = "stablehlo.compare"(%v63, %v81) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi1>
    %v84 = "stablehlo.compare"(%v63, %v69) {comparison_direction = #stablehlo<comparison_direction GE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x5xi64>, tensor<2x5xi64>) -> tensor<2x5xi1>
    %v85 = "stablehlo.and"(%v84, %v83) : (tensor<2x5xi1>, tensor<2x5xi1>) -> tensor<2x5xi1>
    %v86 = "stablehlo.convert"(%v85) : (tensor<2x5xi1>) -> tensor<2x5xf32>
    %v87 = "stablehlo.dot_general"(%v0, %v86) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<3x5x4xf32>, tensor<2x5xf32>) -> tensor<3x4x2xf32>
    %v88 = "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<3x4xi64>
    %v89 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<3x4xi64>
    %v90 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v91 = "stablehlo.broadcast_in_dim"(%v90) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x4xi64>
    %v92 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v93 = "stablehlo.broadcast_in_dim"(%v92) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x4xi64>
    %v94 = "stablehlo.multiply"(%v88, %v93) : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
    %v95 = "stablehlo.divide"(%v94, %v91) : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
    %v96 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v97 = "stablehlo.broadcast_in_dim"(%v96) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x4xi64>
    %v98 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v99 = "stablehlo.broadcast_in_dim"(%v98) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x4xi64>
    %v100 = "stablehlo.add"(%v88, %v99) : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
    %v101 = "stablehlo.multiply"(%v100, %v97) : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
    %v102 = "stablehlo.constant"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %v103 = "stablehlo.broadcast_in_dim"(%v102) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x4xi64>
    %v104 = "stablehlo.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
    %v105 = "stablehlo.broadcast_in_dim"(%v104) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x4xi64>
    %v106 = "stablehlo.add"(%v101, %v105) : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
    %v107 = "stablehlo.divide"(%v106, %v103) : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
    %v108 = "stablehlo.subtract"(%v107, %v95) : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
    %v109 = "stablehlo.compare"(%v89, %v107) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi1>
    %v110 = "stablehlo.compare"(%v89, %v95) {comparison_direction = #stablehlo<comparison_direction GE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi1>
    %v111 = "stablehlo.and"(%v110, %v109) : (tensor<3x4xi1>, tensor<3x4xi1>) -> tensor<3x4xi1>
    %v112 = "stablehlo.convert"(%v111) : (tensor<3x4xi1>) -> tensor<3x4xf32>
    %v113 = "stablehlo.dot_general"(%v87, %v112) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<3x4x2xf32>, tensor<3x4xf32>) -> tensor<3x2x3xf32>
    %v114 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v115 = "stablehlo.broadcast_in_dim"(%v114) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3x2x3xi64>
    %v116 = "stablehlo.select"(%v61, %v115, %v58) : (tensor<3x2x3xi1>, tensor<3x2x3xi64>, tensor<3x2x3xi64>) -> tensor<3x2x3xi64>
    %v117 = "stablehlo.convert"(%v116) : (tensor<3x2x3xi64>) -> tensor<3x2x3xf32>
    %v118 = "stablehlo.divide"(%v113, %v117) : (tensor<3x2x3xf32>, tensor<3x2x3xf32>) -> tensor<3x2x3xf32>
    %v119 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v120 = "stablehlo.broadcast_in_dim"(%v119) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x2x3xf32>
    %v121 = "stablehlo.select"(%v61, %v120, %v118) : (tensor<3x2x3xi1>, tensor<3x2x3xf32>, tensor<3x2x3xf32>) -> tensor<3x2x3xf32>
    "func.return"(%v121) : (tensor<3x2x3xf32>) -> ()
  }
}
